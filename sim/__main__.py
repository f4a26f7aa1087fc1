"""``python -m sim``: the ``icl-verify`` command line (:func:`sim.cli.main`)."""
import sys

from sim.cli import main

if __name__ == "__main__":
    sys.exit(main())
