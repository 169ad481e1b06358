"""The outputs: the model's output spec, its axes and labels in datasets, the positions and panels figures and
summaries read them in, the ensemble's member axis."""
