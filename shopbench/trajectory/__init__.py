"""The trajectory: the record of one episode (``record``), reading a policy's reply
(``reply``) and the one loop that plays an episode (``loop``)."""
