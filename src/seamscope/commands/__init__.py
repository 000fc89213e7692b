"""One module per subcommand, each exposing ``command``; they parse arguments, call the API,
print, and write files. No figure is computed here."""
