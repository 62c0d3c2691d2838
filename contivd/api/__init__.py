"""contivd's HTTP surface: the Contiv netmaster REST API, plugin routes and status."""
