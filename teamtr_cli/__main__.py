"""``python -m teamtr_cli``: the ``teamtr`` command."""

import sys

from teamtr_cli.app import main

sys.exit(main())
