"""Reading microdata (:mod:`.read`), deterministic file bytes (:mod:`.write`) and the pandera
input/output schemas (:mod:`.schemas`)."""
