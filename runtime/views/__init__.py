"""Read-only views of a run: the run card, the execution log and the run report. They
import the core and `store.base` only, and write nothing."""
