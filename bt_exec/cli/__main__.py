"""``python -m bt_exec.cli``: the ``bt-exec`` command."""
import sys

from . import main

sys.exit(main())
