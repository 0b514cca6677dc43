"""`python -m nsight_tui ...` is the `nsight-tui` command."""
import sys

from nsight_tui.cli import main

sys.exit(main())
