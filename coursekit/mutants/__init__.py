"""Mutation testing of the graded exercises (``make mutants``).

Each autograded answer of a solved lesson is changed in small ways that a learner could write
(an operator, a constant off by one, an axis, a dropped mask line, a transpose left out): the
*mutants*. Each mutant runs against the test cells its answer reaches, visible and hidden, in a
fork of the lesson's state just before the exercise; a mutant that every test passes *survives*,
and a survivor is either equivalent to the answer (triaged with a reason in the lesson's
``mutants.yml``) or a hole in the tests. docs/writing-lessons.md says how to triage.

- :mod:`.operators`: what is changed (mutmut's operators, and the few attention code needs)
- :mod:`.generate`: the mutants of one answer cell, in a fixed order
- :mod:`.execution`: a lesson's cells run in one namespace, each mutant in a forked child
- :mod:`.triage`: ``mutants.yml``: equivalent mutants, and what each exercise's last run found
- :mod:`.report`: the per-lesson table and the survivors as diffs
"""
