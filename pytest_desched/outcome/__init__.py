"""What happened to each pod, and is it the same as before: the model every use produces.

`fates` (the vocabulary of fates and deciding layers), `ledger` (PodFate, PodRow,
RoundFigures, Ledger), `identity` (the same pod and fate across runs, and what was not
compared) and `verdict` (pass, fail or no verdict, and the exit code). Pure data on the ground
floor: no cluster, no I/O, so the descheduler's log parser and every engine can import it.
"""
