"""Theory experiments: the Endpoint Selection Problem trained against its bound."""
