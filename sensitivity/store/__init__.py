"""The resumable, verified block store and its record-by-record netCDF files."""
