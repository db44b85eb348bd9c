"""The ``sdc`` command line (sdc.cli.main)."""
