"""The release written once as per-batch kernels and mergeable partials (:mod:`.kernels`), the
household release's passes (:mod:`.households`, :mod:`.household_public`), the keyed public
order (:mod:`.order`), the internal records file (:mod:`.records_file`) and the report
accumulator's per-batch parts (:mod:`.report_parts`); every executor runs them."""
