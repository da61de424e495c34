class Fatal(Exception):
    """A condition the user must act on: printed as one line, no stack trace."""
