"""A plug-in whose `GROUP_TYPE` is not a `GroupTypeDeclaration` (the type's name where its
declaration belongs): start-up refuses it in one line (`test_plugins.py`)."""

GROUP_TYPE = "toy"
