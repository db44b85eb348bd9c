"""Writing a release config: ``sdc init``'s draft (:mod:`.draft`) and ``sdc design``'s search for
recodings (:mod:`.design`)."""
