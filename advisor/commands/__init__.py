"""One module per ``trainjob-advisor`` subcommand (see ``advisor.cli``)."""
