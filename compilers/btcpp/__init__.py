"""BehaviorTree.CPP XML, the ``btcpp`` dialect: read (``xml_read``), loaded into the IR (``load``), checked
(``checks``), repaired (``patch``) and compiled (``compile``); ``catalog`` reads a TreeNodesModel, ``paths`` the
element paths issues and fixes name, ``names`` what BT.CPP 3 and 4 call things. The ``Btcpp`` dialect object is
``compilers.dialects``'."""
