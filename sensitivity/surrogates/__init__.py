"""The models: Keras files, SavedModels, functions, ensemble artifacts, and a user's simulator."""
