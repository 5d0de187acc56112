"""Tools for looking at models: probes that find and name bugs, and plots (matplotlib heatmaps and curves,
interactive Altair charts). The exercise graders are ``course_utils.checks``; the notebook grader is
``python -m course_utils.grade``.

- ``probes``: ``causality_probe``, ``equality_probe``, ``padding_probe``, ``position_probe``, ``batch_probe``,
  ``output_probe``, each returning a ``ProbeReport``
- ``plots``: ``attention_heatmap``, ``attention_grid``, ``attention_chart``, ``dependency_heatmap`` (the causality
  probe's matrix), the positional-encoding plots,
  ``loss_curve``, ``evaluation_curve``, ``use_offline_charts``
- ``_vega``: charts drawn to HTML or PNG without internet (vl-convert)
"""

from .plots import (
    attention_chart,
    attention_grid,
    attention_heatmap,
    dependency_heatmap,
    evaluation_curve,
    loss_curve,
    positional_encoding_chart,
    positional_encoding_heatmap,
    positional_waves,
    use_offline_charts,
)
from .probes import (
    ProbeReport,
    batch_probe,
    causality_probe,
    equality_probe,
    output_probe,
    padding_probe,
    position_probe,
)

__all__ = [
    "ProbeReport",
    "attention_chart",
    "attention_grid",
    "attention_heatmap",
    "batch_probe",
    "causality_probe",
    "dependency_heatmap",
    "equality_probe",
    "evaluation_curve",
    "loss_curve",
    "output_probe",
    "padding_probe",
    "position_probe",
    "positional_encoding_chart",
    "positional_encoding_heatmap",
    "positional_waves",
    "use_offline_charts",
]
