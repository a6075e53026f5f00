"""`python -m todoflow` runs the command line."""

from todoflow.cli import main

raise SystemExit(main())
