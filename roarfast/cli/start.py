"""What the `roarfast` command decides from its arguments alone, before anything heavy loads: whether it computes
(and so starts again with a well-kept allocator, roarfast.common.memory.preload_allocator) or only answers (help, the
version, a listing), which a second start would only slow down. Imports nothing."""

#: commands that read and print, never compute: no allocator to start again for
LISTING = ("ls", "list")
#: the options that answer at once, whatever the command
ANSWERS = ("-h", "--help", "--version")
#: the group's own options that take a value (the value is not the command)
VALUED = ("--config",)


def computes(args: list) -> bool:
    """Whether the command line `args` (sys.argv[1:]) runs a command that computes: not the group alone, --help or
    --version anywhere, ls or list."""
    if any(arg in ANSWERS for arg in args):
        return False
    rest = iter(args)
    for arg in rest:
        if arg in VALUED:
            next(rest, None)
        elif not arg.startswith("-"):
            return arg not in LISTING
    return False
