"""UI pieces of the app. Pure functions here turn run records into HTML and figures."""
