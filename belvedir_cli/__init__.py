"""`bv`: the Belvedir command line, a client of the REST API."""
