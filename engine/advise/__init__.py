"""Advise: the best way to spread a model over the devices one has (``main.py advise``, docs/advise.md).

One probe of the model (engine/advise/model_probe.py) and one of the devices' communication
(engine/advise/link_probe.py) predict every candidate (engine/advise/candidates.py, engine/advise/predict.py), in a
child process that holds torch (engine/advise/ranking.py); the best few are checked by short runs
(engine/advise/verify.py) and the advice is made of both (engine/advise/advice.py, engine/advise/command.py).
"""
