"""Other tools' formats: the standalone SavedModel export and its reload check, PEST, SALib."""
