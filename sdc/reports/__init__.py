"""Risk and utility reports: sdcMicro measures (:mod:`.disclosure`), the Monte Carlo intruder
(:mod:`.intruder`), utility (:mod:`.utility`), the JSON schemas (:mod:`.schema`), the report
documents (:mod:`.build`) and the HTML page (:mod:`.html`)."""
