"""The inputs: the parameter space, marginals and copula, covariance, fields, input uncertainty."""
