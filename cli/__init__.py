"""The ``sdc`` command line (cli.main)."""
