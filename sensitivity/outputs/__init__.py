"""The outputs: the model's output spec, its axes and labels in datasets, the ensemble's member axis."""
