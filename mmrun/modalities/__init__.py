"""Built-in modality plugins. Each subpackage declares a Modality and its model families."""
