"""Publishing a release folder: the atomic publish by rename (:mod:`.folder`) and the review
gate (:mod:`.review`: staged releases, approve, reject)."""
