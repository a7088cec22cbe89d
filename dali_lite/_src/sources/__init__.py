"""The sources room: `fn.external_source` (serial polling, push mode, the callables that poll a
source in the main process and in workers, the checks of every batch) and the constant
outputs of `set_outputs`."""
