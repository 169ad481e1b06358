"""The compiled engine: Jacobians and Hessians of a surrogate or an ensemble, with its fast paths."""
