"""The screens of `capscan tui`."""
