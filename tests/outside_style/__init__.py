"""Modules in the style of public Transformer code the course did not write (nanoGPT, the Annotated Transformer,
Hugging Face), with classic bugs planted behind flags, and a catalogue of cases that runs the course's probes on
them (``cases.CASES``; ``tools/score_probes.py`` prints the scorecard)."""
