"""One module per ``crosscurv`` sub-command: ``HELP``, ``add_arguments(parser)``, ``run(args)``."""
