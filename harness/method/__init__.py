"""The measuring method, written once and used by every scenario, the baseline included (docs/method.md, "The pieces
of the method"): records, rules and judges. Its modules import only the standard library, each other and the data
modules (errors, paths, settings, port_facts): never a measuring module, a scenario, the report or a command."""
