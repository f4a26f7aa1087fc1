def main(argv=None):  # placeholder until the CLI lands
    raise SystemExit("icl-verify: not built yet")
