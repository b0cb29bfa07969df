"""One update's maths: group advantages, the clipped surrogate, the token KL and its monitor, the
policy step inside the trust region (:func:`trainers.optim.update.update_agent`), behaviour
cloning, and the update's record."""
