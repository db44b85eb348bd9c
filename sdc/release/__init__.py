"""Making a release folder: the public frame and codebook (:mod:`.public`), the audit record and
its verification (:mod:`.audit`), all files as bytes (:mod:`.assemble`), the atomic folder
(:mod:`.folder`) and seed files (:mod:`.seeds`)."""
