/* store_ops — to be written */
