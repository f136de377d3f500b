"""Coverage-guided fuzzing of amcast's decoders (atheris / libFuzzer).

Theory of operation: each module of ``fuzz.targets`` is one fuzz target: a
``test_one_input(data)`` that feeds ``data`` to one decoder (and what consumes its
output) and raises only when it finds a bug: an exception other than the decoder's
documented error type, or a broken invariant (a decoded value that does not survive
its own encoder, a sans-IO ``Node`` that emits a datagram it cannot decode itself).
``seeds()`` returns real encodings, made with the real encoders, to start from.

``python -m fuzz.run TARGET [libFuzzer flags] CORPUS...`` runs one target under atheris
with our modules instrumented; ``python -m fuzz.campaign`` (``make fuzz``) runs several
one after another for a given time each, keeps their corpora under ``var/fuzz`` and
appends a summary to ``docs/fuzz/results.md``. ``tests/fuzz`` replays every target over
its seeds and the committed crash regressions in CI, without atheris.
"""
