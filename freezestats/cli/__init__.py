"""The command line (stage 12): one module per command group, argument parsing and printing only.

``main`` holds the parser and the list of commands; ``study`` the commands that create, run and list a study
(validate, run, worker, status, export); ``analysis`` analyze and report; ``base`` what they share.
"""

from freezestats.cli.main import main

__all__ = ["main"]
