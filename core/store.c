/* store — to be written */
