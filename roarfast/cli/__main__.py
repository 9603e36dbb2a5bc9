"""`python -m roarfast.cli`: the roarfast command line."""

from roarfast.cli import main

main()
