"""The release job and the files of a release folder: the job without Prefect (:mod:`.job`,
:mod:`.preflight`), the public frame and codebook (:mod:`.public`), the audit record
(:mod:`.record`), SPSS/Stata files (:mod:`.stat_files`), all files as bytes (:mod:`.assemble`)."""
