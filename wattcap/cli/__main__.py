"""`python -m wattcap.cli ...` runs the command line (the tests and the server rely on it)."""

from wattcap.cli import main

main()
