"""Release series: seed files (:mod:`.seeds`), which releases belong to one series
(:mod:`.membership`) and the risk of a series measured from the releases' records files
(:mod:`.risk`); docs/METHOD.md, "Release series"."""
