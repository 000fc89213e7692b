"""``seamscope try``'s remedy trials, one feature in one package: the catalogue of candidates
(:mod:`.catalogue`, :mod:`.cache`), the fresh-process runs (:mod:`.runs`), the output fingerprints
they compare (:mod:`.fingerprint`), the verdicts (:mod:`.verdicts`), what each candidate targets
(:mod:`.targets`) and the trial that orders them
(:mod:`.trial`). Imports nothing itself, so a child run that needs only the fingerprint stays cheap;
never imports the command line (``seamscope.commands``)."""
